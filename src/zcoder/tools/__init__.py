"""Tools the model may call: specs, workspace confinement, file, search and shell tools."""
