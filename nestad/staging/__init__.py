"""Staging: derivatives as programs.  See notes/staging.md."""
from . import lowering, simplify  # noqa: F401  (codegen spellings, trace-time identities)
from .control import while_loop
from .program import GuardFailure, Program
from .stage import Staged, StagingWarning, jit, stage
from .tracing import trace
from .export import ExportError, export
