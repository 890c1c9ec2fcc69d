"""Shipped model catalogues (package data): hub_top.json, read by bringup.hub.refs.catalogue()."""
