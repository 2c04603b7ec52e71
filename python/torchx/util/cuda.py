"""Whether this host can put tensors on a GPU (needs PyTorch)."""


def has_cuda_devices() -> bool:
    """True if PyTorch is built with CUDA and this host has at least one CUDA device
    (``torch.cuda.is_available()`` alone is True for a CUDA build on a host without GPUs)."""
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.device_count() > 0)
