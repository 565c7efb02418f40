"""Training jobs (DESIGN stage 6): one job per process, the local pool that runs W of them, progress bars."""
