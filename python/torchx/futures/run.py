"""``python -m torchx.futures.run LOCATION``: the job side of ``torchx.futures``. Runs the call
an ``Executor`` wrote to ``LOCATION`` and writes its outcome there: the return value, or the
exception with its traceback text (the exception itself when it pickles)."""

from __future__ import annotations

import sys
import traceback
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    from torchx.futures import _transport

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m torchx.futures.run LOCATION", file=sys.stderr)
        return 2
    location = args[0]
    fn, fn_args, fn_kwargs = _transport.load(location, _transport.CALL)
    try:
        value = fn(*fn_args, **fn_kwargs)
    except BaseException as e:  # noqa: BLE001 - every outcome is the caller's to see
        text = traceback.format_exc()
        try:
            _transport.dump(location, _transport.RESULT, ("error", e, text))
        except Exception:  # noqa: BLE001 - the exception does not pickle: its text does
            _transport.dump(location, _transport.RESULT, ("error", None, text))
        print(text, file=sys.stderr, end="")
        return 1
    _transport.dump(location, _transport.RESULT, ("ok", value, None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
