"""The demo: a healthy and a broken training run evaluated end to end by the local pipeline."""
