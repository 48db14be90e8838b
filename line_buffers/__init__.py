from .streaming import build_stream_graph, stream_shape

__all__ = ["build_stream_graph", "stream_shape"]
