"""`bringup smoke`: the capability's package (suite.py registers it; args.py is its torch-free face)."""
