"""The slurm target: sbatch scripts on a Slurm cluster (see _target.py)."""
