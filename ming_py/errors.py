"""The one error type every stage raises for what a user can fix."""


class MingError(Exception):
    """A user-facing error: one line naming the model node/op and what to do."""

    exit_code = 2  # the command's exit code when it ends on this error
