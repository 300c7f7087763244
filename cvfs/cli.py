"""The ``cvfs`` console script: ``demo | motion | keypoints | astro`` subcommands.

The CLI only parses arguments, opens sources, calls the library and draws; every subcommand is a
``_cmd_*`` function taking the parsed arguments. ``main(argv=None)`` is what tests call.
"""

import argparse
import logging
import sys
from pathlib import Path

__all__ = ["main"]

log = logging.getLogger(__name__)


def _cmd_demo(args):
    from cvfs import demo

    out = Path(args.out)
    summary = demo.run(out, parts=args.parts, verbose=not args.quiet)
    print(summary)
    print(f"\ncvfs demo: figures and summary written to {out.resolve()}")
    return 0


def _build_parser():
    parser = argparse.ArgumentParser(prog="cvfs", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    from cvfs import demo

    p = sub.add_parser("demo", help="run every application on embedded data; write figures")
    p.add_argument("--out", default="cvfs-out", help="output folder (default: ./cvfs-out)")
    p.add_argument("--parts", nargs="+", choices=list(demo.PARTS), default=list(demo.PARTS),
                   help="which parts to run (default: all)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_demo)
    return parser


def main(argv=None):
    """Run the ``cvfs`` command line. Returns the process exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError, TypeError) as exc:
        print(f"cvfs {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
