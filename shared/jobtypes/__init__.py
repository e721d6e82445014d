"""The job types shipped with the product, one module each."""
