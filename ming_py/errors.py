"""The one error type every stage raises for what a user can fix."""


class MingError(Exception):
    """A user-facing error: one line naming the model node/op and what to do."""
