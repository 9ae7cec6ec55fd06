"""Exception classes the training toolkit lists (``get_dataparallel_exception_classes``)."""


class SMDDPError(RuntimeError):
    """Base of the stand-in's errors."""


class SMDDPInitError(SMDDPError):
    """The process group could not be set up."""
