"""``cvfs``'s entry point: parse, run the subcommand, turn errors and signals into exit
codes, and say when numba compiles."""

import faulthandler
import logging
import sys

from cvfs.cli.parser import build_parser

__all__ = ["compile_notice", "main"]

log = logging.getLogger(__name__)


def compile_notice(args):
    """When the command's kernels are not in numba's cache yet (first run after installing or
    upgrading cvfs), print one line on stderr as numba starts compiling them: what compiles and
    about how long it takes. Returns a function that stops listening (None if nothing to say)."""
    from cvfs.cli.warmup import COMMAND_GROUPS, GROUPS

    if args.command == "demo":
        keys = [f"demo {part}" for part in args.parts]
    else:
        keys = [f"{args.command} {getattr(args, f'{args.command}_command', '')}"]
    groups = [g for k in keys for g in COMMAND_GROUPS.get(k, ())]
    if args.command == "warmup":
        groups = args.groups or list(GROUPS)
    if not groups:
        return None
    try:
        from cvfs.cli.warmup import cold_groups, expected_seconds, on_first_compile, wait_text

        cold = cold_groups(groups)
    except Exception as exc:  # the notice must never stop a command
        log.debug("kernel cache check failed: %s", exc)
        return None
    if not cold:
        return None
    wait = wait_text(expected_seconds(cold))
    hint = "" if args.command == "warmup" else "; `cvfs warmup` compiles them all ahead"
    text = (f"cvfs: compiling numba kernels ({', '.join(cold)}), needed once after installing "
            f"or upgrading cvfs: {wait} on an idle 2-core machine{hint}")
    return on_first_compile(lambda: print(text, file=sys.stderr, flush=True))


def _command_name(args):
    parts = [args.command] + [getattr(args, f"{args.command}_command", None) or ""]
    return "cvfs " + " ".join(p for p in parts if p)


def _inputs(args):
    """The input paths of a command, for error messages that lack them."""
    found = [getattr(args, n, None) for n in ("image", "video", "model")]
    found += list(getattr(args, "sources", None) or [])
    return ", ".join(str(f) for f in found if f is not None)


def _errors():
    """Exceptions reported as ``cvfs <command>: error: ...`` with exit code 2."""
    errors = (FileNotFoundError, FileExistsError, ValueError, TypeError, ImportError, OSError,
              KeyError, OverflowError)
    try:
        import cv2
    except ImportError:  # pragma: no cover - opencv is a dependency
        return errors
    return errors + (cv2.error,)


def _message(exc, args):
    if isinstance(exc, (FileNotFoundError, FileExistsError, ValueError, TypeError, ImportError)):
        return str(exc)
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.strerror or exc}: {exc.filename}"
    inputs = _inputs(args)
    what = "missing key" if isinstance(exc, KeyError) else type(exc).__name__
    text = str(exc).strip().splitlines()[-1] if str(exc).strip() else ""
    return f"{what} {text} (inputs: {inputs or 'none'})"


def main(argv=None):
    """Run the ``cvfs`` command line. Returns the process exit code.

    Errors are printed as ``cvfs <command>: error: <message>`` with exit code 2; an interrupt
    (Ctrl-C, SIGTERM, SIGHUP) removes the temporary outputs and exits with 128 + the signal.
    ``cvfs keypoints detect`` exits with 3 when it skipped image files it could not read (the
    others processed and written; the summary on stderr names them).
    """
    from cvfs.io import Interrupted, signals_raise
    from cvfs.io.images import pixel_limit

    if not faulthandler.is_enabled():  # a crash in native code prints the Python stack
        faulthandler.enable()
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)[2:]
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    name = _command_name(args)
    stop_notice = compile_notice(args)
    try:
        with signals_raise(), pixel_limit(getattr(args, "max_pixels", None)):
            return args.func(args)
    except (KeyboardInterrupt, Interrupted, SystemError) as exc:
        # a signal that arrives inside a compiled kernel surfaces as a SystemError whose context
        # is the KeyboardInterrupt / Interrupted the handler raised
        cause = exc
        while cause is not None and not isinstance(cause, (KeyboardInterrupt, Interrupted)):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        what = "interrupted" if isinstance(cause, KeyboardInterrupt) else str(cause)
        print(f"{name}: {what}; temporary outputs removed", file=sys.stderr)
        return 130 if isinstance(cause, KeyboardInterrupt) else 128 + cause.signum
    except _errors() as exc:
        print(f"{name}: error: {_message(exc, args)}", file=sys.stderr)
        return 2
    finally:
        if stop_notice is not None:
            stop_notice()
