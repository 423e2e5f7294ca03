"""``nestad.numpy.random`` is numpy's random (``import nestad.numpy.random as npr`` in
code ported from autograd): random draws are constants of every derivative, so nestad
adds nothing to them.  Same functions, same global state as ``numpy.random``."""
import numpy.random as _random
from numpy.random import *  # noqa: F401,F403


def __getattr__(name):
    return getattr(_random, name)
