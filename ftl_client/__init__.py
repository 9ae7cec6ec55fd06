"""The data scientists' client for the fine-tuning launcher: ``LauncherClient`` and ``ftl``."""

from ftl_client.client import LauncherClient, LauncherError, Progress

__all__ = ["LauncherClient", "LauncherError", "Progress"]
