"""The ``keras-mgu`` command line.

Installed as the console script ``keras-mgu`` (and ``python -m keras_mgu``)::

    keras-mgu --help
    keras-mgu identify --help
    keras-mgu identify                                   # built-in simulated tanks, every class
    keras-mgu identify --compare                         # networks of MGU vs GRU vs LSTM
    keras-mgu identify --dataset wh2009 --data-path data/wh2009 --effort 4
    keras-mgu identify --train run1.csv run2.mat --test run3.npz   # your files, 2 experiments
    keras-mgu tune --max-trials 16 --restarts 2 --workers 2   # a sweep, KerasTuner
    keras-mgu simulate --data new.csv --out sim.csv \\
        --model outputs/system_identification/network_mgu_h32_lr0.01/network_mgu.kmgu
    keras-mgu export --out mgu.onnx \\
        --model outputs/system_identification/network_mgu_h32_lr0.01/network_mgu.kmgu

Subcommands:

* ``identify`` (:mod:`keras_mgu.cli.identify`): identify a dynamical system
  with the recipe of :mod:`keras_mgu.sysid`, print the test scores and write
  plots and ``results.json``.
* ``tune`` (:mod:`keras_mgu.cli.tune`): search the recipe's settings on
  validation with KerasTuner; a table, ``trials.json`` and ``trials.png``.
* ``simulate`` (:mod:`keras_mgu.cli.simulate`): simulate a saved model
  (``.kmgu``) on a CSV file; the simulation as CSV, scores when the file has
  the outputs.
* ``export`` (:mod:`keras_mgu.cli.export_command`): a saved model as a
  standalone ONNX simulator.

:func:`main` is the entry point; it takes the argument list (default
``sys.argv[1:]``) and returns the exit status. Neither it nor the command
modules import Keras or a backend before a command runs, so ``--help`` and
usage errors are quick; the backends' start-up logging is silenced unless
``--verbose``. Options are spelled out: an abbreviation (``--input`` for
``--inputs``) is an unknown option. A reader of the printed report that stops
early (``| head -3``) ends the report, not the work
(:mod:`keras_mgu.cli.closed_pipe`).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import traceback
from collections.abc import Sequence

from keras_mgu._version import __version__
from keras_mgu.cli import backends
from keras_mgu.cli import export_command as _export
from keras_mgu.cli import identify as _identify
from keras_mgu.cli import simulate as _simulate
from keras_mgu.cli import tune as _tune
from keras_mgu.cli.closed_pipe import report_until_closed
from keras_mgu.cli.errors import CommandError, UsageError, command_line_text

__all__ = ["build_parser", "main"]

PROG = "keras-mgu"
#: The commands: each module has HELP, DESCRIPTION, add_arguments, check_arguments, run_command.
COMMANDS = {
    "identify": _identify,
    "tune": _tune,
    "simulate": _simulate,
    "export": _export,
}
#: Set in the environment of a run restarted for ``--backend`` (guards against a loop).
_RESTARTED = "KERAS_MGU_CLI_RESTARTED"


_REST_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_REST_LITERAL = re.compile(r"``([^`]+)``")


def plain_text(text: str) -> str:
    """``text`` without reStructuredText markup: ``:func:`f``` and ````x```` become ``f``, ``x``."""
    return _REST_LITERAL.sub(r"\1", _REST_ROLE.sub(r"\1", text))


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps descriptions as written, less their reST markup (:func:`plain_text`),
    and appends ``(default: ...)`` to options with one.

    Options whose default is ``None`` or ``False`` (derived values, flags) say
    so in their own help text.
    """

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain_text(text))

    def _get_help_string(self, action: argparse.Action) -> str:
        text = plain_text(action.help or "")
        default = action.default
        if "%(default)" in text or not action.option_strings:
            return text
        if default is None or default is False or default is argparse.SUPPRESS:
            return text
        return f"{text} (default: %(default)s)"


class ArgumentParser(argparse.ArgumentParser):
    """An ``argparse`` parser whose bad option values are one line, without the usage, and
    whose options are spelled out.

    ``keras-mgu identify: error: argument --units: expected a positive
    integer; got '0'`` (a value its ``type`` or ``choices`` refuses). A wrong
    command line (an unknown option or command, a missing required option,
    options that exclude each other, an option without its value) is reported
    with the usage, as argparse does. Abbreviations are off (``allow_abbrev``
    is False unless given): ``--input`` is not taken for ``--inputs``.
    """

    _bad_value = False

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def _get_value(self, action: argparse.Action, arg_string: str):
        try:
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError:
            self._bad_value = bool(action.option_strings)  # an option's value, not a command
            raise

    def _check_value(self, action: argparse.Action, value) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError:
            self._bad_value = bool(action.option_strings)
            raise

    def error(self, message: str):
        if self._bad_value:
            self.exit(2, f"{self.prog}: error: {message}\n")
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """The ``keras-mgu`` parser with one subparser per command (:class:`ArgumentParser`)."""
    parser = ArgumentParser(
        prog=PROG,
        description="Minimal Gated Unit (MGU) networks for Keras 3: command-line jobs.",
        epilog=f"Run '{PROG} COMMAND --help' for the options of a command. Options are "
        "spelled out in full (--inputs, not --input).",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        title="commands",
        required=True,
        parser_class=ArgumentParser,
    )
    for name, module in COMMANDS.items():
        sub = commands.add_parser(
            name, help=module.HELP, description=module.DESCRIPTION, formatter_class=HelpFormatter
        )
        module.add_arguments(sub)
        sub.set_defaults(
            check=module.check_arguments, handler=module.run_command, subparser=sub,
            read=getattr(module, "read_inputs", None),
        )  # fmt: skip
    return parser


def _current_backend() -> str:
    import keras

    return keras.backend.backend()


def _restart_with_backend(argv: Sequence[str], backend: str) -> int:
    """Run the same command in a new Python process with ``KERAS_BACKEND=backend``.

    Keras fixes its backend when it is first imported, so a ``--backend``
    other than the one already loaded (when :func:`main` runs in a process
    that imported Keras) needs a fresh interpreter.
    """
    loaded = _current_backend()
    if os.environ.get(_RESTARTED):
        raise SystemExit(
            f"{PROG}: error: --backend {backend} was asked for but Keras loaded {loaded} "
            f"even with KERAS_BACKEND={backend}; is the {backend} backend installed?"
        )
    env = dict(os.environ, KERAS_BACKEND=backend, **{_RESTARTED: "1"})
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.basename(root) not in ("site-packages", "dist-packages"):  # a checkout
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    print(f"Keras was loaded with {loaded}; running again with KERAS_BACKEND={backend}", flush=True)
    return subprocess.call([sys.executable, "-m", "keras_mgu", *argv], env=env)


def _fail(args: argparse.Namespace, message: str) -> int:
    """Print ``keras-mgu COMMAND: error: message`` (one line) to stderr; exit status 2.

    Settings named by their Python name are named by their option
    (:func:`~keras_mgu.cli.errors.command_line_text`).
    """
    message = command_line_text(message, args.subparser)
    print(f"{args.subparser.prog}: error: {message}", file=sys.stderr, flush=True)
    return 2


def _prepare_backend(args: argparse.Namespace, argv: Sequence[str]) -> int | None:
    """Check the backend is installed, select it and import it; an exit status when it cannot run.

    The backend is ``--backend``, else the one Keras would load
    (:func:`~keras_mgu.cli.backends.configured_backend`: ``$KERAS_BACKEND``,
    ``keras.json``, else TensorFlow) when it names one of
    :data:`~keras_mgu.cli.backends.BACKENDS` (other backends are checked by
    Keras itself). Before it loads, the environment it reads is set
    (:func:`~keras_mgu.cli.backends.prepare_environment`: for PyTorch,
    ``OMP_WAIT_POLICY=PASSIVE`` unless set). A backend (or Keras) that is
    installed but fails to import is one line naming it, the error and the
    reinstall command; ``--verbose`` also shows the import's output and
    traceback.
    """
    backend = getattr(args, "backend", None)
    wanted = backend or backends.configured_backend()
    missing = backends.missing_backend(wanted) if wanted in backends.BACKENDS else None
    if missing:
        if backend:
            source = "--backend"
        elif os.environ.get("KERAS_BACKEND"):
            source = "KERAS_BACKEND"
        else:
            source = "Keras's configured backend"
            others = [b for b in backends.BACKENDS if not backends.missing_backend(b)]
            if others and "backend" in args:
                missing += f", or choose an installed one with --backend {'|'.join(others)}"
        return _fail(args, f"{source} {wanted}: {missing}")
    backends.prepare_environment(wanted)
    if backend and not backends.use_backend(backend) and backend != _current_backend():
        return _restart_with_backend(argv, backend)
    verbose = getattr(args, "verbose", False)
    if not verbose:
        backends.quiet_backend_logs()
    try:
        backends.import_keras(wanted, quiet=not verbose)
    except backends.BackendImportError as err:
        if verbose:
            traceback.print_exception(err.__cause__, file=sys.stderr)
        hint = "; --verbose shows the whole error" if "verbose" in args and not verbose else ""
        return _fail(args, f"{err}{hint}")
    backends.use_compilation_cache()
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the ``keras-mgu`` command line on ``argv`` (default ``sys.argv[1:]``).

    Returns the exit status (0 on success). Every error is one line
    ``keras-mgu COMMAND: error: ...`` on stderr and status 2: a bad option
    value (from ``argparse``, by :class:`ArgumentParser`: ``SystemExit(2)``),
    a file that is not there or not a model file, an output file named for
    another format than the command writes, data that cannot be read (read
    before the backend is imported), a missing extra or backend. A wrong
    command line (an unknown, abbreviated or missing option, options that
    exclude each other: argparse's and
    :class:`~keras_mgu.cli.errors.UsageError`) also shows the usage. A closed
    pipe on standard output ends the printed report, not the command
    (:func:`~keras_mgu.cli.closed_pipe.report_until_closed`).
    """
    with report_until_closed():
        return _run(argv)


def _run(argv: list[str] | None) -> int:
    """:func:`main`'s work: parse ``argv``, check and read the inputs, run the command."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:  # told by the command's parser, with its usage
        args.subparser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        args.check(args)
        if args.read is not None:  # the data, read and checked before a backend loads
            args.read(args)
        status = _prepare_backend(args, argv)
        if status is not None:
            return status
        return args.handler(args)
    except UsageError as err:
        args.subparser.error(command_line_text(str(err), args.subparser))  # exits with status 2
        raise  # unreachable: error() exits
    except CommandError as err:
        return _fail(args, str(err))
