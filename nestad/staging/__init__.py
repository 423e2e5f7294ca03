"""Staging: derivatives as programs.  See notes/staging.md."""
# (codegen spellings, trace-time identities, and the modules that fill hooks of those below
# them: Program.jvp/vjp, the loop transforms of while_loop)
from . import lowering, simplify, transform, loops  # noqa: F401
from .control import while_loop
from .program import GuardFailure, Program
from .stage import Staged, StagingWarning, jit, stage
from .tracing import trace
from .export import ExportError, export
