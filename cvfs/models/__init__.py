"""Shipped model files (package data); see README.md in this folder."""
