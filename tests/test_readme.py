"""Every ```python block of README.md runs verbatim.

Each block runs alone, in a fresh namespace, so that each is a complete example a reader
can copy.  A block that shows a result must assert it: a top-level expression whose value
is neither None nor used (``nd.derivative(f)(1.0)  # 0.54``) fails the test."""
import ast
import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
TEXT = README.read_text()
BLOCKS = [(TEXT.count("\n", 0, m.start(1)) + 1, m.group(1))
          for m in re.finditer(r"^```python\n(.*?)^```$", TEXT, re.S | re.M)]


def test_blocks_found():
    # Guards the extraction itself: every opened python block is found and closed.
    assert len(BLOCKS) == TEXT.count("```python") >= 3


def _unshown(value, line):
    assert value is None, (f"README.md line {line}: an expression computes {value!r:.80} but "
                           "neither asserts nor uses it; assert the value it shows")


@pytest.mark.parametrize('line, code', BLOCKS, ids=[f"line{line}" for line, _ in BLOCKS])
def test_readme_block_runs(line, code):
    tree = ast.parse(code, filename=f"README.md:{line}")
    assert tree.body, f"README.md line {line}: an empty python block"
    for i, stmt in enumerate(tree.body):
        if isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Constant):
            check = ast.Call(ast.Name('__unshown__', ast.Load()),
                             [stmt.value, ast.Constant(line + stmt.lineno - 1)], [])
            tree.body[i] = ast.copy_location(ast.Expr(check), stmt)
    ast.fix_missing_locations(tree)
    # Line numbers in tracebacks point into README.md.
    ast.increment_lineno(tree, line - 1)
    exec(compile(tree, str(README), "exec"), {'__name__': '__readme__', '__unshown__': _unshown})


def test_a_discarded_value_is_caught():
    with pytest.raises(AssertionError, match="neither asserts nor uses"):
        test_readme_block_runs(1, "import math\nmath.cos(1.0)  # 0.54\n")
    test_readme_block_runs(1, "print('ok')\n")      # a None value is fine
