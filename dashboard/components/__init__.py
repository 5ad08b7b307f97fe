"""Pieces the dashboard pages share: store access with short-lived caches, safe text, charts."""
