"""The window's dialogs: `file_dialogs` (choose a file to open, pick one LSTM layer of a
weights file) and `export_dialog` (File → Export… and each panel's Export).
"""
