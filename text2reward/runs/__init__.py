"""The run store and what is read from it: store and index, ranking, human feedback events, reports."""
