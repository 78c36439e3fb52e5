"""The one exception type that the CLI turns into a one-line message and exit code 2."""


class NasError(Exception):
    """Bad input or an impossible request: a wrong file, field, name or target.

    The message is one line that says what is wrong, where, and what is allowed. The CLI prints
    it as ``nas: error: <message>`` and exits with code 2, without a traceback.
    """

    exit_code = 2

    def __init__(self, message: str):
        text = " ".join(str(message).split())
        if text.startswith("Caught NasError in DataLoader worker"):
            # torch re-raises a worker's exception as NasError(its traceback); keep the message alone
            text = text.rsplit("NasError: ", 1)[-1]
        super().__init__(text)
