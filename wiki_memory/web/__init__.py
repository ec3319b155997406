"""The read-only web view: server-rendered pages under ``/`` (views, rendering)."""
