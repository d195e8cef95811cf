"""Tools from Python functions: define_tool, @tool and modules of tools."""
