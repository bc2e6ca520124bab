"""Parametric knowledge: training local models on a corpus or on a benchmark's train split
(`knowbench train`, extra `knowbench[train]`), and the splits themselves (`knowbench split`)."""
