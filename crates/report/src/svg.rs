//! An SVG backend that needs no font file.
//!
//! With plotters' "ab_glyph" feature, text measurement (used for titles,
//! label areas and tick-label alignment) goes through a registered font even
//! for SVG output, where the browser draws the text. This wrapper answers
//! those measurements from [`text_width`] instead.

use plotters::prelude::{DrawingBackend, SVGBackend};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};

use crate::figures::text_width;

/// plotters' SVG backend with text measured from [`text_width`] instead of
/// a registered font; everything else is delegated unchanged. The SVG
/// backend's own `draw_text` writes a `<text>` element and never consults
/// the font, so with this wrapper SVG output works on machines without any
/// font file.
pub struct SvgBackend<'a>(pub SVGBackend<'a>);

type SvgError<'a> = DrawingErrorKind<<SVGBackend<'a> as DrawingBackend>::ErrorType>;

impl<'a> DrawingBackend for SvgBackend<'a> {
    type ErrorType = <SVGBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), SvgError<'a>> {
        self.0.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), SvgError<'a>> {
        self.0.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<(), SvgError<'a>> {
        self.0.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), SvgError<'a>> {
        self.0.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), SvgError<'a>> {
        self.0.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), SvgError<'a>> {
        self.0.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), SvgError<'a>> {
        self.0.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), SvgError<'a>> {
        self.0.fill_polygon(vert, style)
    }

    fn draw_text<T: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &T,
        pos: BackendCoord,
    ) -> Result<(), SvgError<'a>> {
        self.0.draw_text(text, style, pos)
    }

    fn estimate_text_size<T: BackendTextStyle>(
        &self,
        text: &str,
        style: &T,
    ) -> Result<(u32, u32), SvgError<'a>> {
        let size = style.size();
        Ok((
            text_width(text, size).ceil() as u32,
            (size / 1.24).ceil() as u32,
        ))
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), SvgError<'a>> {
        self.0.blit_bitmap(pos, size, src)
    }
}
