"""What users write, read with care: TOML loading with clear errors (`specs`), where each key is written
(`spec_lines`, so every error names file:line), the dimensions and units of what a design sets (`units`),
the numbers set through environment variables (`environment`), and the user errors themselves (`errors`: exit 2,
"did you mean")."""
