"""The builtin schedulers' typed run options (0.8's ``StructuredOpts`` classes:
``slurm_scheduler.SlurmOpts``, ``kubernetes_scheduler.Opts``, ``local_scheduler.Opts`` ...),
made from the Rust core's option schema: the same names, types, defaults and help as
``torchx runopts``."""

import dataclasses

import pytest
from torchx.schedulers import kubernetes_scheduler, local_scheduler, slurm_scheduler
from torchx.schedulers.api import StructuredOpts


def test_every_builtin_option_is_a_typed_field() -> None:
    opts = slurm_scheduler.SlurmOpts
    assert issubclass(opts, StructuredOpts) and slurm_scheduler.Opts is opts
    typed = opts.from_cfg({"partition": "batch", "mail-user": "me@x", "exclusive": True})
    assert (typed.partition, typed.mail_user, typed.exclusive) == ("batch", "me@x", True)
    # The generated runopts are the core's, option for option.
    assert {name for name, _ in opts.as_runopts()} == {
        name for name, _ in slurm_scheduler.create_scheduler("t").run_opts()
    }
    assert "partition to run the job in" in opts.as_runopts().get("partition").help


def test_required_options_and_defaults() -> None:
    from torchx.schedulers import aws_batch_scheduler

    batch = aws_batch_scheduler.Opts
    with pytest.raises(TypeError):
        batch()  # `queue` is required by the core
    assert batch(queue="q").queue == "q"
    assert kubernetes_scheduler.Opts().namespace == "default"
    local = local_scheduler.Opts
    fields = {f.name for f in dataclasses.fields(local)}
    assert {"log_dir", "prepend_cwd"} <= fields
    assert dict(local.from_cfg({"prependCwd": True}))["prepend_cwd"] is True
