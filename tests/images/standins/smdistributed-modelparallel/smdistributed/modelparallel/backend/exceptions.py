"""Exception classes the training toolkit lists (``get_modelparallel_exception_classes``)."""


class SMPError(RuntimeError):
    """Base of the stand-in's errors."""


class SMPValidationError(SMPError, ValueError):
    """A configuration or call the library rejects."""
