"""The InstructionTranslator: symbolic execution of one frame's bytecode.

``translator.py`` holds the state and the run/step loop; ``registry.py``
builds the 256-slot dispatch table; ``ops/`` holds the handlers, one opcode
family per module.
"""
