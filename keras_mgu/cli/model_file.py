"""What ``simulate`` and ``export`` know of a model file before a backend loads.

:func:`read_model_info` reads the model file's manifest
(:mod:`keras_mgu._manifest`, the standard library alone): a file that is not
a model file is refused at once, and the model's channel names and state
settings let ``simulate`` check the data file's columns and
``--n-initial`` before Keras is imported (which takes seconds).
"""

from __future__ import annotations

import dataclasses
import os

from keras_mgu.cli.errors import DataError, OptionError

__all__ = ["ModelInfo", "check_encoder_history", "read_model_info"]

#: ``n`` when neither ``--n-initial`` nor the model's protocol gives one
#: (``Identification.resolve_n_initial``'s default).
DEFAULT_N_INITIAL = 50


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """A model file's channels and state settings, from its manifest.

    Attributes:
        input_names, output_names: The record's channel names.
        n_initial: The data's protocol ``n``, or None.
        initial_state: The chosen run's ``"learned"`` or ``"encoder"`` state.
        encoder_lag: The samples the chosen run's encoder reads
            (``RecipeConfig.n_initial``).
    """

    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    n_initial: int | None
    initial_state: str
    encoder_lag: int

    def resolve_n_initial(self, n_initial: int | None = None) -> int:
        """``n_initial``, else the protocol's ``n``, else 50 (as the model resolves it)."""
        if n_initial is not None:
            return int(n_initial)
        return self.n_initial or DEFAULT_N_INITIAL


def read_model_info(path: str | os.PathLike) -> ModelInfo:
    """The :class:`ModelInfo` of the model file ``path``; :class:`OptionError` for another file."""
    from keras_mgu._manifest import read_manifest

    try:
        manifest = read_manifest(path)
        config = manifest["runs"][int(manifest["best"])]["config"]
        return ModelInfo(
            tuple(manifest["input_names"]), tuple(manifest["output_names"]),
            manifest["n_initial"], str(config["initial_state"]), int(config["n_initial"]),
        )  # fmt: skip
    except (OSError, ValueError) as err:  # ModelFileError is a ValueError
        raise OptionError(f"cannot load the model: {err}") from err
    except (KeyError, TypeError, IndexError) as err:
        raise OptionError(
            f"cannot load the model: {os.fspath(path)!r} is a damaged keras-mgu model file "
            f"(its manifest lacks {err})"
        ) from err


def check_encoder_history(initial_state: str, lag: int, n: int, given: bool = True) -> None:
    """Refuse ``n`` measured outputs where the model's encoder reads more (:class:`DataError`).

    An encoder model's state is read from the ``lag`` samples before the
    first simulated one; with ``0 < n < lag`` the library would repeat the
    first sample in front of them (:func:`keras_mgu.sysid.models.state.encoder_history`),
    a plant at rest before the record, which a measured experiment seldom
    is. ``n = 0`` (the free run) and learned-state models pass. ``given``:
    whether ``n`` is the user's ``--n-initial`` (else the default).
    """
    if initial_state != "encoder" or not 0 < n < lag:
        return
    source = f"--n-initial {n}" if given else f"the default --n-initial ({n})"
    raise DataError(
        f"{source}: the model's encoder reads {lag} samples to set its state; give "
        f"--n-initial {lag} or more (or 0: the free run from the estimation record's start state)"
    )
