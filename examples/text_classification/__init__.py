"""A transformer text classifier trained with the same recipe on torch, paddle, jittor and oneflow.

``architecture`` describes the model once (sizes and framework-free initial weights); each module
under ``models`` writes it in one framework. ``bench/models.py`` times the same models.
"""
