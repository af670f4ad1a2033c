"""MemProbe's Textual replay UI. It only reads recordings and calls engine functions."""
