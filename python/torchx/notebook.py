"""Creating and running components from a Jupyter/IPython notebook, as TorchX's
``torchx.notebook``: importing it registers the ``%%workspacefile <path>`` cell magic, which
writes the cell to ``<path>`` in the notebook's in-memory workspace (:func:`get_workspace`), a
workspace any scheduler builds (``runner.run_component(..., workspace=get_workspace())``).
Needs IPython (this module is only imported in a notebook)."""

from __future__ import annotations

import posixpath

from IPython.core.magic import register_cell_magic


def get_workspace() -> str:
    """The fsspec URL of the notebook's workspace."""
    return "memory://torchx-workspace/"


@register_cell_magic
def workspacefile(line: str, cell: str) -> None:
    """``%%workspacefile <path>``: writes the cell to ``<path>`` in the workspace."""
    import fsspec

    workspace = get_workspace()
    fs, root = fsspec.core.url_to_fs(workspace)
    path = posixpath.join(root, line.strip())
    fs.mkdirs(posixpath.dirname(path), exist_ok=True)
    with fs.open(path, "wt") as f:
        f.write(cell)
    print(f"Added {line} to workspace {workspace}")


__all__ = ["get_workspace", "workspacefile"]
