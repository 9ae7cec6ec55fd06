"""SMP v1 backend (stand-in): only the exception classes the training toolkit lists."""
