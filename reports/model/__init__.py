"""What the report computes from a bundle: accounting, limits, durability, series, significance, comparison."""
