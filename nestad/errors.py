"""Exception types.  Each names what was wrong and what to do instead."""


class NestadError(Exception):
    """Base class of every error nestad raises on purpose."""


class InvalidInputError(NestadError, TypeError):
    """An argument (or a leaf inside it) is not a number or a known structure."""


class NonScalarOutputError(NestadError, TypeError):
    """A reverse-mode gradient was asked of a function whose output is not a real scalar."""


class MissingRuleError(NestadError, NotImplementedError):
    """A primitive met a mode it has no rule for: a forward (JVP) or reverse (VJP) rule
    for one of its arguments was never given (``defjvp``, ``defvjp`` or ``defpartials``)."""


class PerturbedConversionError(NestadError, TypeError):
    """``float()``, ``int()``, ``math.*`` or ``round()`` on a value that carries a perturbation.

    Converting would silently drop the derivative, so it is refused.
    """


class EscapedPerturbationError(NestadError, ValueError):
    """A perturbed value outlived the derivative call that created it (a side effect leaked it)."""


class UnhashableValueError(NestadError, TypeError):
    """``hash()`` of a perturbed value: a cache keyed by it would return a result computed
    without its derivative, so nestad values cannot be dict keys or set members."""


class BatchedConversionError(NestadError, TypeError):
    """``bool()``, ``float()``... on a value batched by ``nestad.vmap``: it holds one value
    per member of the batch, and Python control flow would have to pick one."""
