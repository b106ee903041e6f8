"""The package's exception types: one base class, one class per kind of failure.

Each class also subclasses the built-in it resembles, so ``except ValueError``
keeps working for callers who do not know about mtl_opt.  The CLI maps these
classes to exit codes (see ``mtl_opt.cli.ExitCode``).
"""


class MTLOptError(Exception):
    """Base class of every error raised on purpose by mtl_opt.

    Examples
    --------
    >>> from mtl_opt import MOLAR, MTLOptError
    >>> try:
    ...     MOLAR(c_gamma=-1.0).fit([[[0.0]]], [[0.0]])
    ... except MTLOptError as error:      # every mtl_opt error; also a ValueError here
    ...     print(type(error).__name__)
    InvalidParameterError
    """


class InvalidDataError(MTLOptError, ValueError):
    """The data set is malformed: shapes, non-finite values, empty tasks, names.

    Examples
    --------
    >>> import numpy as np
    >>> from mtl_opt import InvalidDataError, MultiTaskData
    >>> try:
    ...     MultiTaskData([np.array([[1.0, np.nan]])], [np.array([1.0])])
    ... except InvalidDataError as error:
    ...     print("refused")
    refused
    """


class InvalidDataTypeError(InvalidDataError, TypeError):
    """The data hold a value that cannot be a number (e.g. a dict in a design); also a
    TypeError, as numpy's own refusal of it is."""


class InvalidParameterError(MTLOptError, ValueError):
    """A hyperparameter or option has the wrong type or is out of range.

    Examples
    --------
    >>> from mtl_opt import InvalidParameterError, SparseMTL
    >>> try:
    ...     SparseMTL(s=0).fit([[[0.0]]], [[0.0]])
    ... except InvalidParameterError as error:
    ...     print(str(error).split(";")[0])
    The 's' parameter of SparseMTL must be an int in the range [1, inf)
    """


class UnavailableMethodError(InvalidParameterError, AttributeError):
    """A method the estimator's parameters rule out (e.g. predict_proba with the squared loss);
    also an AttributeError, so ``hasattr`` reports the method absent, as scikit-learn expects."""


class DivergenceError(InvalidParameterError):
    """An iterative learner's values stopped being finite: its step sizes are too large for the data."""


class InstanceFileError(MTLOptError, ValueError):
    """An instance file cannot be read, has unknown keys or bad values."""


class OutputError(MTLOptError, OSError):
    """An output file cannot be written where asked: a directory, an input file, no permission, a full disk."""


class CapabilityError(MTLOptError, ValueError):
    """A backend was asked for a problem class it cannot solve (e.g. MIQP on HiGHS)."""


class LicenseLimitError(CapabilityError):
    """The backend's license does not cover a model this large (e.g. gurobipy's pip license)."""


class SolverUnavailableError(MTLOptError, RuntimeError):
    """The requested solver backend is not installed or cannot be loaded."""


class SolverError(MTLOptError, RuntimeError):
    """The solver failed or returned no usable solution."""


class NotFittedError(MTLOptError, AttributeError):
    """An estimator was used before ``fit`` was called.

    Examples
    --------
    >>> from mtl_opt import MOLAR, NotFittedError
    >>> try:
    ...     MOLAR().predict([[0.0]])
    ... except NotFittedError:
    ...     print("fit first")
    fit first
    """
