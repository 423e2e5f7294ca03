"""GradBench's ``det`` (from cmpad): the determinant of an ell x ell matrix by
expansion by minors along the first row, recursively, on nestad's scalars; and its
gradient by reverse mode.  O(ell!) operations, as the eval intends."""
import nestad as nd

from . import function


def det_by_minors(a, ell):
    """det of the row-major ell x ell matrix ``a`` (a flat list)."""
    def minor(row, cols):
        # the determinant of the rows row.. and the columns cols of a
        if len(cols) == 1:
            return a[row * ell + cols[0]]
        total = 0.0
        for j, c in enumerate(cols):
            term = a[row * ell + c] * minor(row + 1, cols[:j] + cols[j + 1:])
            total = total + term if j % 2 == 0 else total - term
        return total
    return minor(0, tuple(range(ell)))


def _prepare(input):
    return [float(v) for v in input['A']], int(input['ell'])


@function(prepare=_prepare)
def primal(a, ell):
    return det_by_minors(a, ell)


@function(prepare=_prepare, output=lambda g: [float(v) for v in g])
def gradient(a, ell):
    return nd.gradient_r(det_by_minors)(a, ell)
