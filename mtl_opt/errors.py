"""The package's exception types: one base class, one class per kind of failure.

Each class also subclasses the built-in it resembles, so ``except ValueError``
keeps working for callers who do not know about mtl_opt.  The CLI maps these
classes to exit codes (see ``mtl_opt.cli.ExitCode``).
"""


class MTLOptError(Exception):
    """Base class of every error raised on purpose by mtl_opt."""


class InvalidDataError(MTLOptError, ValueError):
    """The data set is malformed: shapes, non-finite values, empty tasks, names."""


class InvalidDataTypeError(InvalidDataError, TypeError):
    """The data hold a value that cannot be a number (e.g. a dict in a design); also a
    TypeError, as numpy's own refusal of it is."""


class InvalidParameterError(MTLOptError, ValueError):
    """A hyperparameter or option has the wrong type or is out of range."""


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
    """An estimator was used before ``fit`` was called."""
