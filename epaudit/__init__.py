"""epaudit: a feature-parity audit of ONNX Runtime execution providers."""

__version__ = "0.1.0"
