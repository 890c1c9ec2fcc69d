"""Reports read only the store (or an exported bundle); they never re-run anything."""
