"""bringup: does a real training stack run on a PyTorch device, and how fast?"""

__version__ = "0.1.0"
