"""makeroom: relocate lower-priority replicas so higher-priority ones can schedule."""

__version__ = "0.1.0"
