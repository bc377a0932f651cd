"""One construct per concern; :mod:`infra.stack` composes them and does every grant."""
