"""Test doubles that ship with accelopt, for its tests, its benchmarks and yours: an
OpenAI-compatible HTTP server answering from scripted rules (``scripted.ScriptedServer``), the
same rules in process as a ``ChatModel`` (``scripted_chat.ScriptedChat``), and the rules
themselves (``scripting``). Nothing else in accelopt imports this package."""
