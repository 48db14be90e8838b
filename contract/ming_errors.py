"""The error of the deployment side: a problem a user can fix (a file, a flag, damaged metadata)."""


class DeployError(Exception):
    """A problem a user can fix, stated in one line."""
