"""Imported before gradio (``app.py``'s first import): gradio gets a temporary folder of this process's own, private
and removed at exit, unless the host set ``GRADIO_TEMP_DIR`` (:func:`ui.files.gradio_folder`). Some of gradio's
modules read the variable once, when they are imported, so it is set here, on import, rather than in ``main``."""

from ui.files import gradio_folder

GRADIO_FOLDER = gradio_folder()
