"""Imports os: refused before anything runs."""

import os


def kernel(x, y):
    os.system("true")
